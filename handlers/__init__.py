"""The SAM functions of the API, the Lambda worker, the reaper and the scheduler: template.yaml's
Handler names a module here; each calls the product (onward/)."""
