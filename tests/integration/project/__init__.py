"""Whole-project checks that need the endpoint or a tool: sam build, the template's deployment, the
call-path reading's soundness and the shared test stack."""
