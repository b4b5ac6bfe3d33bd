"""The archiver's SAM function folder: template.yaml's ArchiverFunction Handler is archiver.app.handler."""
