import unittest

from wordfreq import top


class TopTest(unittest.TestCase):
    def test_counts_and_order(self):
        self.assertEqual(top("the cat and the hat and the bat", 2), [("the", 3), ("and", 2)])

    def test_case_and_punctuation(self):
        self.assertEqual(top("Spam, spam. SPAM! eggs", 5), [("spam", 3), ("eggs", 1)])

    def test_empty(self):
        self.assertEqual(top("", 3), [])


if __name__ == "__main__":
    unittest.main()
