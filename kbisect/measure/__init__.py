"""One boot = one sample: taking it, retaking a disturbed one, storing it, reading it back."""
