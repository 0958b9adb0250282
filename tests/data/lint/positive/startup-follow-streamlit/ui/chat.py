import streamlit as st
from transformers import AutoModelForCausalLM, AutoTokenizer


@st.cache_resource
def load():
    name = "HuggingFaceTB/SmolLM2-360M-Instruct"
    return AutoTokenizer.from_pretrained(name), AutoModelForCausalLM.from_pretrained(name)


tok, model = load()
prompt = st.chat_input("Say something")
