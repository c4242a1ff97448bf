"""What runs caliban for a session: the protocol both backends implement (base.py), the
`caliban -p` backend (oneshot/) and the `caliban mcp serve` backend (drive/), and the frames'
completion both share (completion.py). The session sees only the protocol."""
