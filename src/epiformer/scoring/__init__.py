"""Apps that use a trained model on new data: predict, variants, browser tracks."""
