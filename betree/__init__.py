"""bexdb's Boolean-expression index (the lead exports ``Index`` here); kept import-free."""
