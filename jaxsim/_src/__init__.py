"""The engine: one module per MuJoCo engine file or stage (see DESIGN.md, "The house")."""
