"""Onward on one machine: the embedded AWS endpoint (moto's server, fixed), Lambda's event source
mappings as pollers, an API Gateway stand-in, the whole platform (`onward up`) and metering."""
