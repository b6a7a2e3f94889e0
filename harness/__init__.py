"""The guest-side harness: runs inside the booted kernel, Python standard library only.

Entry point: `python3 harness/guest.py --scenario-json ... --out ... --template-dir ...`.
Nothing here may import kbisect (or anything outside the standard library).
"""
