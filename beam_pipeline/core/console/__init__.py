"""What the console shows and keeps off it: progress counts, quantities, libraries' own output."""
