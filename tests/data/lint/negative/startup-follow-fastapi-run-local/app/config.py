MODEL_NAME = "dslim/bert-base-NER"
