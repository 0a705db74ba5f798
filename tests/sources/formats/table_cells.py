"""The cells the readers' table property tests draw: any text, with the characters a Markdown table must escape."""
from hypothesis import strategies as st


def cells(extra: str = ""):
    """Short cell texts of any printable character, `|`, `\\`, line breaks and tabs (and `extra`) included."""
    return st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")) | st.sampled_from("|\\\n\t" + extra),
                   max_size=12)
