// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.17;

/// @title HostileToken: a test-only ERC-20 that attacks whoever moves it.
/// @notice Used only by Tollgate's attack tests of x402BatchSettlement. Its EIP-3009
/// receiveWithAuthorization moves tokens without checking a signature (a channel config may name
/// any token). In `mode` 1 its transfer returns false without moving anything; in `mode` 2 it
/// moves the tokens, then calls `target` with `reentry` from inside the transfer and records how
/// that inner call ended, so a test can see the re-entry refused while the outer call completes.
contract HostileToken {
    mapping(address => uint256) public balanceOf;
    uint8 public mode;
    address public target;
    bytes public reentry;
    bool public reentrySucceeded;
    bytes public reentryResult;

    function mint(address to, uint256 amount) external {
        balanceOf[to] += amount;
    }

    function arm(uint8 mode_, address target_, bytes calldata reentry_) external {
        mode = mode_;
        target = target_;
        reentry = reentry_;
    }

    function receiveWithAuthorization(address from, address to, uint256 value, uint256, uint256, bytes32, bytes calldata) external {
        balanceOf[from] -= value;
        balanceOf[to] += value;
    }

    function transfer(address to, uint256 value) external returns (bool) {
        if (mode == 1) return false;
        balanceOf[msg.sender] -= value;
        balanceOf[to] += value;
        if (mode == 2) {
            mode = 0; // once: the inner call must not recurse through this transfer again
            (reentrySucceeded, reentryResult) = target.call(reentry);
        }
        return true;
    }
}
