"""The Lambda entry points' code (relay, projector, reaper, scheduler, worker): parse the event,
call the deployment's component, shape the answer (template.yaml's Handler of each function)."""
