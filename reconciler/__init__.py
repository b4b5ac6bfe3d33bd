"""The fence reconciler's SAM function folder: template.yaml's FenceReconcilerFunction Handler is
reconciler.app.handler."""
