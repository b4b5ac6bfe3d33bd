"""The fence reconciler's SAM function folder: template.yaml's ReconcilerFunction Handler is
reconciler.app.handler."""
