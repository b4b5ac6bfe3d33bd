"""The projector's SAM function folder: template.yaml's ProjectorFunction Handler is
projector.app.handler."""
