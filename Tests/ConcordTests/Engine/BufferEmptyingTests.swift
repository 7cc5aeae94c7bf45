import Testing

@testable import Concord

/// An element whose deinit a test can see.
private final class Element {}

/// The buffers a write fills (the journal's records, the nodes listed under a layer) are
/// emptied at its end by `removeAllKeepingCapacity()`: a few elements popped one by one,
/// longer arrays removed at once. Both ways must empty the array, release every element and
/// keep the buffer.
@Suite("Engine: emptying a write's buffers")
struct BufferEmptyingTests {
  @Test(arguments: [0, 1, 2, 4, 5, 9, 100])
  func emptiesReleasesAndKeepsItsBuffer(count: Int) {
    var array = (0..<count).map { _ in Element() }
    array.reserveCapacity(128)
    let capacity = array.capacity
    weak let first = array.first
    weak let last = array.last
    array.removeAllKeepingCapacity()
    #expect(array.isEmpty)
    #expect(array.capacity == capacity)
    #expect(first == nil && last == nil)
  }
}
