# placeholder; being written
registry = None
