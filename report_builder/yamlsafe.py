"""User YAML read safely: `load_yaml` parses a configuration file or a ``--set`` value as ``yaml.safe_load``
does, with every failure one `ConfigError` line: a syntax error as ``FILE:LINE:COLUMN: not valid YAML:
<problem>``, aliases that would add more than `ALIAS_BUDGET` values once expanded (an "alias bomb": a
few hundred bytes that expand to billions of values) or that refer to themselves refused before anything
is expanded, a key given twice in one mapping, nesting too deep for the parser, and values PyYAML cannot
construct (a date out of range).
"""
from __future__ import annotations

import yaml

from report_builder.errors import ConfigError

ALIAS_BUDGET = 10_000
"""How many values YAML aliases (``*name``) may add to a document once expanded: a configuration needs a
handful; an alias bomb (each alias doubling the last) is refused before it is expanded."""


def _alias_growth(root: "yaml.Node", where: str) -> int:
    """How many values the aliases of ``root`` add when expanded (node count with every alias expanded,
    less the document's own nodes); `ConfigError` for a recursive alias. Iterative, memoised by node."""
    size: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        kids = ([c for kv in node.value for c in kv] if isinstance(node, yaml.MappingNode)
                else list(node.value) if isinstance(node, yaml.SequenceNode) else [])
        if done:
            active.discard(id(node))
            size[id(node)] = 1 + sum(size[id(c)] for c in kids)
            continue
        if id(node) in size:
            continue
        if id(node) in active:
            mark = node.start_mark
            raise ConfigError(f"{where}:{mark.line + 1}:{mark.column + 1}: a YAML alias refers to a value that "
                              "contains it (a recursive alias); write the values out")
        active.add(id(node))
        if isinstance(node, yaml.MappingNode):
            _unique_keys(node, where)
        stack.append((node, True))
        stack.extend((c, False) for c in kids if id(c) not in size)
    return size[id(root)] - len(size)


def _unique_keys(node: "yaml.MappingNode", where: str) -> None:
    """`ConfigError` for a key given twice in one mapping (YAML forbids it; PyYAML would keep the last
    silently, dropping the first one's settings); merge keys (``<<``) are YAML's own."""
    seen: dict[tuple[str, str], "yaml.Mark"] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
            continue
        first = seen.setdefault((key.tag, key.value), key.start_mark)
        if first is not key.start_mark:
            mark = key.start_mark
            raise ConfigError(f"{where}:{mark.line + 1}:{mark.column + 1}: key {key.value[:80]!r} is given twice "
                              f"(first on line {first.line + 1}); keep one")


def load_yaml(text: str, where: str):
    """Parse YAML text from a user (a config file, a ``--set`` value) safely, as ``yaml.safe_load``.

    Errors are one `ConfigError` line: ``FILE:LINE:COLUMN: not valid YAML: <problem>``; aliases that
    would add more than `ALIAS_BUDGET` values once expanded (an alias bomb) are refused unexpanded.
    """
    loader = None
    try:
        loader = yaml.SafeLoader(text)  # its reader refuses a control character here (ReaderError)
        node = loader.get_single_node()
        if node is None:
            return None
        grown = _alias_growth(node, where)
        if grown > ALIAS_BUDGET:
            raise ConfigError(f"{where}: YAML aliases expand to {grown:.3g} more values (at most {ALIAS_BUDGET:,} "
                              "allowed; an alias bomb?); write the values out instead of repeating aliases")
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = ", ".join(str(x) for x in (e.context if not str(e.context or "").startswith("while") else None,
                                             e.problem) if x)
        at = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{where}{at}: not valid YAML: {problem or 'syntax error'}") from None
    except yaml.reader.ReaderError as e:  # a control character: where it is, and which
        pos = e.position if isinstance(e.position, int) and isinstance(text, str) else None
        at = "" if pos is None else f":{text.count(chr(10), 0, pos) + 1}:{pos - text.rfind(chr(10), 0, pos)}"
        raise ConfigError(f"{where}{at}: not valid YAML: character #x{e.character:04x} is not allowed "
                          "(a control character)" if isinstance(e.character, int) else
                          f"{where}{at}: not valid YAML: {str(e).splitlines()[0]}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{where}: not valid YAML: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    except RecursionError:
        raise ConfigError(f"{where}: YAML nested too deeply to read; a configuration needs a few levels") from None
    except ConfigError:
        raise
    except (ValueError, TypeError, OverflowError) as e:  # a value PyYAML cannot construct (e.g. a date out of range)
        raise ConfigError(f"{where}: not valid YAML: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}") \
            from None
    finally:
        if loader is not None:
            loader.dispose()
