// SHA-256 (FIPS 180-4 examples), HMAC-SHA256 (RFC 4231) and the constant-time comparison.
#include "crypto.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {
std::string hex(const idem::Digest &d) {
    char buf[65];
    return std::string(idem::hex_lower(d.data(), d.size(), buf));
}
} // namespace

TEST(Sha256, Fips180Examples) {
    EXPECT_EQ(hex(idem::sha256("abc")),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(hex(idem::sha256("")),
              "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(hex(idem::sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, IncrementalEqualsOneShot) {
    std::string data(100000, 'x');
    for (size_t i = 0; i < data.size(); i++)
        data[i] = static_cast<char>(i * 7);
    idem::Sha256 h;
    for (size_t i = 0; i < data.size(); i += 777)
        h.update(std::string_view(data).substr(i, 777));
    EXPECT_EQ(h.finish(), idem::sha256(data));
}

TEST(Sha256, ResetStartsOver) {
    idem::Sha256 h;
    h.update("abc");
    EXPECT_EQ(hex(h.finish()), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    h.reset();
    EXPECT_EQ(hex(h.finish()), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    h.reset();
    h.update("ab");
    h.reset(); // (drops "ab")
    h.update("abc");
    EXPECT_EQ(hex(h.finish()), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    // Every reset copies one shared empty digest: what one context is fed reaches no other.
    idem::Sha256 a, b;
    a.reset();
    a.update("abc");
    b.reset();
    EXPECT_EQ(hex(b.finish()), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    a.update("d");
    EXPECT_EQ(hex(a.finish()), "88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589");
}

TEST(HmacSha256, Rfc4231) {
    // Test case 1
    EXPECT_EQ(hex(idem::hmac_sha256(std::string(20, '\x0b'), "Hi There")),
              "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    // Test case 2
    EXPECT_EQ(hex(idem::hmac_sha256("Jefe", "what do ya want for nothing?")),
              "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    // Test case 6: key longer than the block size
    EXPECT_EQ(hex(idem::hmac_sha256(std::string(131, '\xaa'),
                                    "Test Using Larger Than Block-Size Key - Hash Key First")),
              "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    // Empty key and message (RFC 2104 pads the key with zeros).
    EXPECT_EQ(hex(idem::hmac_sha256("", "")),
              "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

TEST(ConstantTimeEqual, ComparesContentAndLength) {
    EXPECT_TRUE(idem::constant_time_equal("", ""));
    EXPECT_TRUE(idem::constant_time_equal("abc", "abc"));
    EXPECT_FALSE(idem::constant_time_equal("abc", "abd"));
    EXPECT_FALSE(idem::constant_time_equal("abc", "ab"));
    EXPECT_FALSE(idem::constant_time_equal(std::string("a\0b", 3), std::string("a\0c", 3)));
    EXPECT_TRUE(idem::constant_time_equal(std::string("a\0b", 3), std::string("a\0b", 3)));
}
