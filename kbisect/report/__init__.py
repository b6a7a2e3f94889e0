"""What every report shares: plots, plain text, the disturbed-samples section."""
