"""What an --incremental update's near-copy grouping takes of one slot of the lookup by content."""
from beam_pipeline.core.output import catalog_entries, catalog_lookup, incremental_update, output_layout
from beam_pipeline.core.planning import near_copies
from beam_pipeline.pipeline import earlier_copies, incremental

SHA_A, SHA_B, SHA_C, SHA_D = ('a' * 64, 'b' * 64, 'c' * 64, 'd' * 64)


def _line(uri: str, sha: str, phash: str) -> str:
  entry = catalog_entries.Entry(uri, 'file:1:2', sha, 'train', 'cat', (), (), 48, 1500, False, False, False, False,
                                phash=phash, colour='01' * 8)
  return catalog_lookup.BY_CONTENT.line('0123456789abcdef', entry)


def test_a_slot_gives_each_file_the_updated_dataset_holds_once():
  """Two kept catalogued copies of one picture, a picture both catalogued and new, a dropped
  record's and a new file's: a hash a file, the dropped record's left out, so that the grouping
  needs no shuffle of every file to keep one of each."""
  rank = near_copies.priority(False, 48, 1500)
  lines = [_line('/in/a1.jpg', SHA_A, '1' * 32), _line('/in/a2.jpg', SHA_A, '1' * 32),
           _line('/in/b.jpg', SHA_B, '2' * 32), _line('/in/c.jpg', SHA_C, '3' * 32)]
  new = [(SHA_B, (SHA_B, '2' * 32, rank, '01' * 8)), (SHA_D, (SHA_D, '4' * 32, 7, '')),
         (SHA_D, (SHA_D, '4' * 32, 5, ''))]  # a new file named twice keeps its smallest
  sides = {'lines': [[output_layout.encoded(line) for line in lines]],  # as the lookup built again gives them
           'dropped': [[incremental.Dropped((SHA_C, '/in/c.jpg'))]], 'hashes': [new]}
  batches = list(earlier_copies._slot_hashes((0, sides), '/out'))
  assert sorted(hashed for batch in batches for hashed in batch) == [
      (SHA_A, '1' * 32, rank, '01' * 8), (SHA_B, '2' * 32, rank, '01' * 8), (SHA_D, '4' * 32, 5, '')]


def test_an_update_on_one_machine_keeps_the_index_of_a_large_dataset_or_of_one_that_has_it_but_of_look_alikes():
  small, large = (incremental_update.Decision(True, catalogued=count)
                  for count in (earlier_copies.INDEXED_FROM - 1, earlier_copies.INDEXED_FROM))
  assert earlier_copies.grouped_in_memory(True, small)
  assert not earlier_copies.grouped_in_memory(True, large)
  assert not earlier_copies.grouped_in_memory(True, small._replace(near_index_distance=10))
  assert not earlier_copies.grouped_in_memory(False, small)  # workers always keep it
  look_alikes = large._replace(look_alikes=int(earlier_copies.LOOK_ALIKE_SHARE * large.catalogued) + 1)
  assert earlier_copies.grouped_in_memory(True, look_alikes)
  assert earlier_copies.grouped_in_memory(True, look_alikes._replace(near_index_distance=10))
  assert not earlier_copies.grouped_in_memory(True, look_alikes._replace(look_alikes=look_alikes.look_alikes - 1))


def test_a_slot_gives_the_lines_of_the_hashes_asked_for_and_of_those_of_several_lines():
  """Each hash asked for that the slot holds, and each of several lines if asked, in hash order:
  all of a hash's lines and no other's; a hash the slot lacks gives nothing."""
  shas = ['1' * 64, '2' * 64, '3' * 64, '4' * 64, '5' * 64]
  lines = sorted(_line(f'/in/{sha[0]}.{copy}.jpg', sha, '0' * 32)
                 for sha, copies in zip(shas, (1, 3, 1, 2, 1)) for copy in range(copies))

  def found(wanted, repeated=False):
    return [(sha, [line.split('"')[3] for line in of]) for sha, of in earlier_copies.of_hashes(lines, wanted, repeated)]

  assert found([shas[2], SHA_A]) == [(shas[2], ['/in/3.0.jpg'])]
  assert found([shas[4], shas[0]]) == [(shas[0], ['/in/1.0.jpg']), (shas[4], ['/in/5.0.jpg'])]
  assert found([shas[4]], repeated=True) == [(shas[1], ['/in/2.0.jpg', '/in/2.1.jpg', '/in/2.2.jpg']),
                                            (shas[3], ['/in/4.0.jpg', '/in/4.1.jpg']), (shas[4], ['/in/5.0.jpg'])]
  assert found([], repeated=True) == found([shas[1], shas[3]])
  assert not found([SHA_A]) and not list(earlier_copies.of_hashes([], [SHA_A], repeated=True))
