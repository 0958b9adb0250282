import runpod
runpod.serverless.start({"handler": lambda job: job})
