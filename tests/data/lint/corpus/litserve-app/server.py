import litserve as ls
# loads the model from /models at start
