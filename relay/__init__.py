"""The relay's SAM function folder: template.yaml's RelayFunction Handler is relay.app.handler."""
