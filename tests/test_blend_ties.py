"""Equal blended scores tie on paper id, whatever order their terms were summed in (another plan, another backend)."""

from retrieval.config import RetrievalConfig
from retrieval.corpus.paper import Paper
from retrieval.search.blend import blend


def test_scores_a_last_bit_apart_tie_on_paper_id():
    # 13.20136474768912 and the next double up: the same sum of the same terms, added in two orders.
    low, high = 13.20136474768912, 13.201364747689121
    assert low != high
    papers = {pid: Paper(pid, pid, year=2000) for pid in ("b", "a")}
    ranked = blend(RetrievalConfig(), papers, {"b": None, "a": None}, {"b": high, "a": low}, 20.0, {}, {}, (1990, 2000))
    assert [r.paper.id for r in ranked] == ["a", "b"]  # the id decides, not the last bit
