"""The schema DSL of spec/MVU.md: Zod-style declarations parsed into a bounded AST and
interpreted without executing JavaScript."""
