"""Model-based quality classifier: hashed word n-gram features, a logistic model trained from a
positive and a negative dataset version, saved as a versioned artifact with a manifest."""
