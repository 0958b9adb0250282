print("llm")
