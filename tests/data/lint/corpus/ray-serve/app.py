from ray import serve

@serve.deployment
class LLM:
    pass

deployment = LLM.bind()
