"""Planning for measurement-driven flavors: performance models, dimensioning, placement."""
