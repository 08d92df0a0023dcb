"""Listed images met with their annotations, and an AutoML detection CSV's rows of one image merged."""
from beam_pipeline.core import rejections
from beam_pipeline.core.inputs import annotated_items, fingerprints
from beam_pipeline.core.inputs.annotations import AnnotatedObject, ImageAnnotation
from beam_pipeline.core.messages import InputItem, Rejection

BOX = AnnotatedObject('cat', 1, 2, 3, 4, where='annotation id 7')
ANNOTATION = ImageAnnotation('a.jpg', 40, 30, (BOX,), where='image id 1')


def test_an_image_takes_its_annotations_objects_and_size():
  [item] = annotated_items.joined('in/a.jpg', [InputItem('in/a.jpg')], [ANNOTATION], 'coco.json', False)
  assert item == InputItem('in/a.jpg', objects=(BOX,), annotated_size=(40, 30))
  assert annotated_items.image_uri('in', ANNOTATION) == 'in/a.jpg'


def test_an_annotation_of_no_listed_image_and_a_second_one_are_errors_of_the_file():
  assert list(annotated_items.joined('in/a.jpg', [], [ANNOTATION], 'coco.json', False)) == [
      Rejection('coco.json', rejections.BAD_ANNOTATION,
                'image id 1: names in/a.jpg, which is not an image listed under --input')]
  second = ANNOTATION._replace(where='image id 9')
  values = list(annotated_items.joined('in/a.jpg', [InputItem('in/a.jpg')], [second, ANNOTATION], 'coco.json', False))
  assert values == [Rejection('coco.json', rejections.BAD_ANNOTATION,
                              'image id 9: a second annotation of in/a.jpg; image id 1 is used'),
                    InputItem('in/a.jpg', objects=(BOX,), annotated_size=(40, 30))]


def test_an_image_without_boxes_is_a_negative_or_dropped():
  empty = ANNOTATION._replace(objects=())
  for annotations in ([], [empty]):
    [kept] = annotated_items.joined('in/a.jpg', [InputItem('in/a.jpg')], annotations, 'coco.json', False)
    assert kept.objects == ()
    [dropped] = annotated_items.joined('in/a.jpg', [InputItem('in/a.jpg')], annotations, 'coco.json', True)
    assert (dropped.uri, dropped.reason) == ('in/a.jpg', rejections.UNANNOTATED)


def test_the_rows_of_one_image_merge_in_row_order_with_the_first_split_given():
  def row(number, label=None, split=None):
    objects = (AnnotatedObject(label, 0, 0, 1, 1, where=f'm.csv:row {number}'),) if label else ()
    return InputItem('a.jpg', split=split, objects=objects)

  item = annotated_items.merged([row(12, 'dog', 'train'), row(3), row(9, 'cat')], False)
  assert [obj.label for obj in item.objects] == ['cat', 'dog'] and item.split == 'train'
  assert annotated_items.merged([row(3)], True).reason == rejections.UNANNOTATED


def test_an_image_whose_rows_give_boxes_changes_its_fingerprint_with_any_of_its_rows():
  """--incremental: an image whose second box moved counts as changed, though its first row did not."""
  def row(number, xmax):
    item = InputItem('a.jpg', objects=(AnnotatedObject('cat', 0, 0, xmax, 1, where=f'm.csv:row {number}'),),
                     row=number)
    return item._replace(fingerprint=fingerprints.of_row('file:5:7', item))

  first = annotated_items.merged([row(3, 0.5), row(9, 0.6)], False).fingerprint
  assert first.startswith('file:5:7|row:')
  assert annotated_items.merged([row(9, 0.6), row(3, 0.5)], False).fingerprint == first
  assert annotated_items.merged([row(3, 0.5), row(9, 0.7)], False).fingerprint != first
  assert annotated_items.merged([row(3, 0.5), row(9, 0.6)._replace(fingerprint='')], False).fingerprint == ''
  assert annotated_items.merged([InputItem('a.jpg', row=3)], False).fingerprint == ''
