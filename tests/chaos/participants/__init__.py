"""One module per family of the storm; each exports a ``Participant``."""
