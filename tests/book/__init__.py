"""The book as a whole: its structure and configuration, every notebook, its costs, its shell
blocks, its style and dependencies, the house's rules, the rendered pages."""
