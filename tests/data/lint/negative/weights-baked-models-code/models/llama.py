class LlamaForCausalLM:
    pass
