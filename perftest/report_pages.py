"""The pool's pages line of the benchmark reports (broker, torch)."""


def pool_pages_line(meta: dict) -> str:
    """What `cxlpool info` said backs the pool's mapping, from meta.env."""
    try:
        size = int(meta.get("pool_page_size", ""))
    except ValueError:
        return "not recorded"
    text = "**%d MiB**" % (size >> 20) if size >= 1 << 20 else "**%d KiB**" % (size >> 10)
    text += " (%s)" % meta.get("pool_page_source", "?")
    if size < 2 << 20:
        text += (": every reader process takes a fault per page it first touches "
                 "(a devdax CXL device maps 2 MiB pages)")
    if meta.get("pool_note"):
        text += "; " + meta["pool_note"]
    return text
