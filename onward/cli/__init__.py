"""The `onward` command line: the worker runtime (`onward worker`) and the operators' commands; the
local stack's commands (`onward up`, `onward endpoint`) are plugged in by onward-infra."""
