"""Reliability suite: faults in training, hostile input to every endpoint, load."""
