from rag.elite.terms import inflections
from rag.text.analysis import content_terms, stem


def test_inflected_forms_fold_onto_one_stem():
    assert stem("carried") == stem("carries") == stem("carry")
    assert stem("rotate") == stem("rotated") == stem("rotating") == stem("rotates")
    assert stem("stopped") == stem("stopping") == stem("stops") == stem("stop")
    assert stem("gateways") == stem("gateway")
    assert stem("boxes") == stem("box")


def test_short_words_and_numbers_are_left_alone():
    assert stem("gas") == "gas"
    assert stem("1842") == "1842"


def test_content_terms_drop_stop_words_and_repeats():
    assert content_terms("How many gateways does the cache of the gateway hold?") == ["gateway", "cach", "hold"]


def test_inflections_cover_plural_past_and_progressive():
    assert {"cache", "caches", "cached", "caching"} <= set(inflections("cache"))
    assert {"battery", "batteries"} <= set(inflections("battery"))
    assert {"stopped", "stopping"} <= set(inflections("stop"))
    assert {"box", "boxes"} <= set(inflections("box"))
