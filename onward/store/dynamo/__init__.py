"""The job store on DynamoDB: item keys and shapes, index names, the transactions each change
becomes, and the recorder that sends them. The only place that knows DynamoDB's item layout."""
