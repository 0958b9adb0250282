
serving_dflt