"""The job store on the embedded endpoint (and each backend): every operation, races, the model-based test,
fairness of the claim path, retention and throttling."""
