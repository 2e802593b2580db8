"""The built-in tagging corpora: found in their packages, split the same way every time, and
valid in their scheme."""

from electra_tf.tasks import tagging_corpora as corpora
from electra_tf.tasks import tagging_data as data


def test_japanese_ner_split_and_scheme():
  path, train, dev = corpora.hironsan_ner()
  assert (len(train), len(dev)) == (400, 100)
  assert corpora.hironsan_ner()[1][0].words == train[0].words  # the same split every time
  assert data.detect_scheme(train + dev, path) == "iob2"
  data.check_tags(train + dev, "iob2", path)  # the corpus's two I- after O read as B-
  assert {"B-LOC", "I-LOC", "B-PSN", "O"} <= set(data.label_list(train))


def test_chinese_part_of_speech_split_and_tags():
  path, train, dev = corpora.peoples_daily_pos()
  assert (len(train), len(dev)) == (17536, 1946)
  assert data.detect_scheme(train, path) == "none"
  data.check_tags(dev, "none", path, data.label_list(train))
  assert train[0].source[0] == f"{train[0].words[0]}\t{train[0].tags[0]}"


def test_open_iob2_chunks_reads_a_stray_inside_tag_as_a_beginning():
  sentence = data.Sentence(("a", "b", "c", "d"), ("O", "I-X", "I-X", "I-Y"), (1, 2, 3, 4),
                           ("a", "b", "c", "d"))
  fixed, = corpora.open_iob2_chunks([sentence])
  assert fixed.tags == ("O", "B-X", "I-X", "B-Y")


def test_english_twitter_ner_split_and_scheme():
  path, train, dev = corpora.wnut16_ner()
  assert (len(train), len(dev)) == (1915, 479)
  assert sum(len(s.words) for s in train + dev) == 46469
  assert corpora.wnut16_ner()[2][0].words == dev[0].words  # the same split every time
  assert not {s.lines[0] for s in train} & {s.lines[0] for s in dev}  # each sentence once
  assert data.detect_scheme(train + dev, path) == "iob2"
  data.check_tags(train + dev, "iob2", path)  # read as shipped: nothing to repair
  types = {tag[2:] for s in train for tag in s.tags if tag != "O"}
  assert types == {"person", "geo-loc", "other", "company", "facility", "product",
                   "musicartist", "sportsteam", "movie", "tvshow"}
  assert set(data.label_list(dev)) <= set(data.label_list(train))
