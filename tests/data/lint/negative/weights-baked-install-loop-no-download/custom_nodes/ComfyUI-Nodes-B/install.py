print("nothing to install")
