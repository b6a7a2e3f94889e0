"""A virtme-ng guest on this host (KVM or TCG)."""
