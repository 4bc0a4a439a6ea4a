"""The command line: Typer only. Parse -> call one library function -> render with rich."""
