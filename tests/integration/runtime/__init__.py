"""Workers on the embedded endpoint: real Worker threads, timeouts, the worker process and the Lambda
worker."""
