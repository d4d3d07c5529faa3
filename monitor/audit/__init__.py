"""The offline audit: input mapping of a scored cohort file and the batch run of every axis."""
