"""The schema DSL (docs/contract/mvu-dsl.md): Zod-style declarations parsed into a bounded AST
and interpreted without executing JavaScript."""
